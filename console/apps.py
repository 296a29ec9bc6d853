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
        from django_q.signals import pre_execute

        from console.health import worker_heartbeat_on_task

        # A busy worker stays "ready" though its heartbeat task waits behind a backlog.
        pre_execute.connect(worker_heartbeat_on_task, dispatch_uid="console.worker_heartbeat")
        # Before the WSGI handler loads the middleware, so the Django instrumentation's is in.
        tracing_setup()
