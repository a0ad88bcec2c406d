"""The HTTP service behind ``yamblab serve``: what it answers, without the web framework
(:mod:`.service`), the FastAPI app and server (:mod:`.serve`), and the browser client (``static/``)."""
