"""The bundled acceptance suites: pytest --pyargs pytest_inferaccept.suites --server-url URL."""
