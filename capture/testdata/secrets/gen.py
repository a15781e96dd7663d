#!/usr/bin/env python3
"""Generates corpus.json: FAKE secrets shaped like real ones, planted in MCP
traffic. Every value is random; none was ever a live credential.
Run: python3 gen.py > corpus.json (the seed keeps it stable)."""
import base64, json, random, string

rnd = random.Random(20261130)
AL = string.ascii_letters + string.digits
LO = string.ascii_lowercase + string.digits
HEX = "0123456789abcdef"

def r(n, alphabet=AL):
    return "".join(rnd.choice(alphabet) for _ in range(n))

def pem(kind):
    body = base64.b64encode(bytes(rnd.getrandbits(8) for _ in range(600))).decode()
    lines = [body[i:i + 64] for i in range(0, len(body), 64)]
    return f"-----BEGIN {kind}PRIVATE KEY-----\n" + "\n".join(lines) + f"\n-----END {kind}PRIVATE KEY-----\n", lines

def b64url(b):
    return base64.urlsafe_b64encode(b).decode().rstrip("=")

kinds = []
def add(kind, secret, text, key, must=None):
    kinds.append({"kind": kind, "secret": secret, "text": text, "key": key, "must_not_contain": must or [secret]})

s = "ghp_" + r(36); add("github-pat", s, f"git push failed; token {s} was rejected", "GITHUB_TOKEN_VALUE")
s = "github_pat_" + r(22) + "_" + r(59); add("github-fine-grained-pat", s, f"using {s} for the API", "gh")
s = "gho_" + r(36); add("github-oauth", s, f"oauth grant returned {s}", "grant")
s = "glpat-" + r(20, AL + "-_"); add("gitlab-pat", s, f"GITLAB {s} expired", "gl")
s = "AKIA" + r(16, string.ascii_uppercase + "234567"); add("aws-access-key-id", s, f"aws_access_key_id={s}", "aws_access_key_id")
s = r(40, AL + "/+"); add("aws-secret-access-key", s, f"aws_secret_access_key = {s}", "aws_secret_access_key")
s = "AIza" + r(35, AL + "-_"); add("gcp-api-key", s, f"maps call with key {s} denied", "maps")
p, lines = pem("")
sa = json.dumps({"type": "service_account", "project_id": "demo-" + r(6, LO), "private_key_id": r(40, HEX),
                 "private_key": p, "client_email": "svc@demo.iam.gserviceaccount.com"})
add("gcp-service-account-key", lines[2], sa, "credentials_json", lines[1:-1])
s = r(3, AL) + str(rnd.randint(0, 9)) + "Q~" + r(34, AL + "_~."); add("azure-ad-client-secret", s, f"client secret '{s}' rejected by AAD", "az")
s = "xoxb-" + r(12, string.digits) + "-" + r(13, string.digits) + "-" + r(24); add("slack-bot-token", s, f"slack says invalid_auth for {s}", "bot")
s = "xoxp-" + "-".join(r(12, string.digits) for _ in range(3)) + "-" + r(32, LO); add("slack-user-token", s, f"user token {s}", "u")
s = "https://hooks.slack.com/services/T" + r(8, string.ascii_uppercase + string.digits) + "/B" + r(10, string.ascii_uppercase + string.digits) + "/" + r(24)
add("slack-webhook-url", s, f"POST {s} returned 404", "hook")
s = "sk_live_" + r(24); add("stripe-live-key", s, f"charge failed with {s}", "stripe")
s = "sk_test_" + r(24); add("stripe-test-key", s, f"test mode key {s}", "stripe_test")
s = "SK" + r(32, HEX); add("twilio-api-key", s, f"twilio sid {s}", "twilio")
s = "SG." + r(22, AL + "-_") + "." + r(43, AL + "-_"); add("sendgrid-api-key", s, f"sendgrid send with {s}", "sg")
s = "key-" + r(32, HEX); add("mailgun-api-key", s, f"mailgun_api_key = {s}", "mailgun_api_key")
s = "sk-proj-" + r(74, AL + "-_") + "T3BlbkFJ" + r(74, AL + "-_"); add("openai-api-key", s, f"OpenAI 401 for {s}", "openai")
s = "sk-ant-api03-" + r(93, AL + "-_") + "AA"; add("anthropic-api-key", s, f"anthropic key {s} invalid", "anthropic")
s = "hf_" + r(34, string.ascii_letters); add("huggingface-token", s, f"hub download with {s}", "hf")
s = "npm_" + r(36, LO); add("npm-token", s, f"//registry/:_authToken={s}", "npmrc")
s = "pypi-AgEIcHlwaS5vcmc" + r(60, AL + "-_"); add("pypi-token", s, f"twine upload -p {s}", "pypi")
s = "shpat_" + r(32, HEX); add("shopify-token", s, f"shop admin token {s}", "shop")
s = r(64, HEX); add("discord-bot-token", s, f"discord_bot_token = {s}", "discord_bot_token")
s = str(rnd.randint(10**8, 10**9)) + ":A" + r(34, AL + "-_"); add("telegram-bot-token", s, f"telegram_bot_token: {s}", "telegram_bot_token")
s = "HRKU-AA" + r(58, AL + "-_"); add("heroku-api-key", s, f"heroku auth {s}", "heroku")
s = "doo_v1_" + r(64, HEX); add("digitalocean-token", s, f"doctl auth init -t {s}", "do")
s = r(40, LO); add("datadog-api-key", s, f"datadog_api_key={s}", "datadog_api_key")
s = "lin_api_" + r(40); add("linear-api-key", s, f"linear {s}", "linear")
hdr = b64url(b'{"alg":"HS256","typ":"JWT"}'); pl = b64url(json.dumps({"sub": r(8), "exp": 1893456000, "n": r(12)}).encode())
s = hdr + "." + pl + "." + b64url(bytes(rnd.getrandbits(8) for _ in range(32))); add("jwt", s, f"session jwt {s}", "id")
for kind, label in (("pem-rsa", "RSA "), ("pem-ec", "EC "), ("pem-openssh", "OPENSSH ")):
    p, lines = pem(label)
    add(kind, lines[1], p, "key_material", lines[1:-1])
pw = r(20, AL + "-_."); add("basic-auth-url", pw, f"clone https://deploy:{pw}@git.internal.test/repo.git failed", "remote", [pw])
s = r(40, AL + "-._~"); add("bearer-header", s, f"GET /v1/me\nAuthorization: Bearer {s}\n401 Unauthorized", "headers_dump")
cred = base64.b64encode(("admin:" + r(16)).encode()).decode(); add("basic-auth-header", cred, f"Authorization: Basic {cred}", "hdr")
pw = r(14) + "!%*"; add("password-field", pw, f"login failed: password={pw}", "password")
pw = r(18, AL); add("db-connection-string", pw, f"connect postgres://app:{pw}@db.internal:5432/prod: ECONNREFUSED", "dsn_text")
pw = r(16, AL); add("ado-connection-string", pw, f"Server=tcp:sql.internal,1433;Database=prod;User ID=sa;Password={pw};Encrypt=true", "conn")
s = r(48, HEX); add("cookie-header", s, f"Cookie: sessionid={s}; theme=dark", "raw_headers")
s = r(32, AL); add("set-cookie-header", s, f"Set-Cookie: auth={s}; HttpOnly; Secure", "resp_headers")

cases = []
n = 0
for k in kinds:
    sec, text, key = k["secret"], k["text"], k["key"]
    n += 1
    cases.append({"name": k["kind"] + "/arguments", "kind": k["kind"], "must_not_contain": k["must_not_contain"],
                  "message": {"jsonrpc": "2.0", "id": n, "method": "tools/call",
                              "params": {"name": "run_command", "arguments": {"command": text, "env": {key: sec}}}}})
    n += 1
    cases.append({"name": k["kind"] + "/result", "kind": k["kind"], "must_not_contain": k["must_not_contain"],
                  "message": {"jsonrpc": "2.0", "id": n, "result": {"content": [{"type": "text", "text": text}], "isError": False}}})
    n += 1
    cases.append({"name": k["kind"] + "/error", "kind": k["kind"], "must_not_contain": k["must_not_contain"],
                  "message": {"jsonrpc": "2.0", "id": n, "error": {"code": -32603, "message": "tool failed: " + text, "data": {"detail": text}}}})
    n += 1
    inner = json.dumps({"deploy": {"steps": [{"env": {key: sec}}, {"log": text}]}})
    cases.append({"name": k["kind"] + "/nested", "kind": k["kind"], "must_not_contain": k["must_not_contain"],
                  "message": {"jsonrpc": "2.0", "id": n, "result": {
                      "structuredContent": {"a": {"b": [{"c": {"d": {key: sec, "note": text}}}]}},
                      "content": [{"type": "text", "text": inner}], "isError": True}}})

print(json.dumps({"note": "FAKE secrets generated by gen.py; none is real", "kinds": len(kinds), "cases": cases}, indent=1))
