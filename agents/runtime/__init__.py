"""The runtime: how a run's LangGraph thread advances durably on django-q2 workers.

``advance`` (the loop), ``lease`` (one worker at a time), ``versions`` (drain / migrate),
``budget`` (steps and tokens), ``failures`` (classify, retry, dead-letter), ``recovery`` (runs
whose worker died), ``checkpoint`` (the checkpointer and compiled graphs), ``registry``
(agents), ``llm`` (the model factory and the offline model).
"""
