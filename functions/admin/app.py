from claros.api.entry import handler_for

lambda_handler = handler_for("admin")
