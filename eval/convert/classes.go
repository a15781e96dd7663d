package convert

// LiveMCPBenchClasses labels the failures of the LiveMCPBench run, by
// hand: one class per cause as a reader of the error text would name it,
// with the property or status it names where the fix depends on it.
var LiveMCPBenchClasses = rules(
	"required_property:$1", `'(\w+)' is a required property`,
	"required_property:$1", `"received": "undefined",\s*"path": \[\s*"(\w+)"`,
	"wrong_type:$1", `is not of type '(\w+)'`,
	"wrong_type:list", `Input should be a valid list`,
	"above_maximum", `greater than or equal to the maximum`,
	"invalid_url", `\(Invalid url\)`,
	"invalid_choice", `The selected \w+ is invalid`,
	"connection_timeout", `Connection timeout to host`,
	"robots_disallowed", `robots\.txt.*not allowed`,
	"robots_unreachable", `Failed to fetch robots\.txt`,
	"http_forbidden", `status code 403|HTTP error:? 403|Status: 403`,
	"http_server_error", `HTTP error:? 5\d\d`,
	"http_bad_request", `: 400$`,
	"fetch_failed", `fetch failed`,
	"rate_limited", `anomaly in the request|too quickly`,
	"internal_error", `^INTERNAL_ERROR$`,
	"file_not_found", `File not found|ENOENT|[Nn]o such file`,
	"canvas_missing", `No canvas generated`,
	"process_gone", `Failed to send input to process`,
	"database_not_initialised", `no such table`,
	"server_not_configured", `is not defined in the configuration`,
	"browser_unavailable", `Failed to (launch|initialize) (the )?browser`,
	"unknown_tool", `Unknown tool`,
)

// ToolBenchClasses labels the failures of the ToolBench answers, by hand.
var ToolBenchClasses = rules(
	"no_such_function", `No such function name`,
	"redirect_loop", `Exceeded \d+ redirects`,
	"unexpected_argument:$1", `unexpected keyword argument '(\w+)'`,
	"upstream_error", `status_code=5\d\d`,
	"bad_request", `status_code=400|Invalid request query input`,
	"postcode_invalid", `CEP INV`,
	"postcode_not_found", `CEP NAO ENCONTRADO`,
	"timeout", `[Tt]imed? ?out`,
	"error_page", `Message error\.\.\.`,
)
