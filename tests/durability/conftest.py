from tests.support.fixtures import api_client_for, page_client_for, processes  # noqa: F401
