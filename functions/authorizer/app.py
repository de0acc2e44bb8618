# claros.api.authorizer makes importlib.metadata lazy itself (claros/lazy_packages.py); not
# Powertools' packages: the authorizer imports no Powertools at all.
from claros.api.authorizer import authorizer_handler

lambda_handler = authorizer_handler()
