"""Rules: the expression language of `when` and `derived` (``expr``) and near-miss money
(``amounts``). Pure code: no I/O, no storage."""
