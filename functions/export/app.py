from claros.api.lambda_entry import handler_for

lambda_handler = handler_for("export")
