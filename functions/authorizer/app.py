from claros.api.authorizer import authorizer_handler

lambda_handler = authorizer_handler()
