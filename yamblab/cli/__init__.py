"""The ``yamblab`` command line: the app, its commands and its entry point (:mod:`.main`), and the
command groups mounted on it (:mod:`.model`, :mod:`.valuation`)."""
