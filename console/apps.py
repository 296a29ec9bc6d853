from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    name = "console"
    verbose_name = "Console"

    def ready(self) -> None:
        from django.conf import settings
        from django.db.models.signals import post_save

        from console import checks  # noqa: F401 - registers the deploy checks
        from console.tokens import tokens_end_on_password_change
        from console.tracing import tracing_setup

        # A signal, though the code avoids them: a password changes in the admin, on the password
        # page, by manage.py changepassword or by any set_password(); saving the user is the one
        # place all of them pass (Django ends the sessions there too, by the session hash).
        post_save.connect(
            tokens_end_on_password_change,
            sender=settings.AUTH_USER_MODEL,
            dispatch_uid="console.tokens_end_on_password_change",
        )
        # Before the WSGI handler loads the middleware, so the Django instrumentation's is in.
        tracing_setup()
