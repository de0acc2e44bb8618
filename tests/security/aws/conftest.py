"""The AWS attacks' fixtures: the whole stack on moto with the template's real IAM policies
(tests/stack.py) and ``world``, that stack seen through each function's role
(test_aws_roles_cannot_rewrite.py). Its ``keys`` (the stack's) stands for the local
server's keys that tests/security/conftest.py gives the other attack files."""

from tests.security.aws.test_aws_roles_cannot_rewrite import world  # noqa: F401
from tests.stack import functions, keys, stack, stack_store, stream_batches  # noqa: F401
