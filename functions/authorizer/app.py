# No claros.lazy_packages here: the authorizer imports no Powertools at all.
from claros.api.authorizer import authorizer_handler

lambda_handler = authorizer_handler()
