"""Plain helpers every app may import (errors, pagination, API shapes); imports none of ours."""
