"""What the tests share that is not a test: servers on loopback, the proxy and the
simulator played in a thread, store fillers, paths of the bundled files, the real-data
corpora, a private PostgreSQL cluster, a headless browser.

``tests/`` is on ``sys.path`` (pytest's prepend import mode puts the root conftest's folder
there), so a test imports ``from support.loopback import serve_in_thread``.
"""
