# First: Powertools' event handler package loads only what is used (claros/lazy_packages.py).
from claros import lazy_packages

lazy_packages.install()

from claros.api.entry import handler_for  # noqa: E402

lambda_handler = handler_for("web")
