"""The secret corpus (forms people paste) and a clean corpus that must come through unchanged.

Secrets are assembled from parts so this file itself does not look like a leaked credential.
"""
from __future__ import annotations

_A = "4f9Qz7Lm2Xc8Vb1Nk6Hj3Gd5Sa0Pw"  # 30 characters of credential-like noise


def _n(prefix: str, size: int) -> str:
    return prefix + (_A * 4)[:size]


OPENAI = _n("sk-", 40)
OPENAI_PROJ = _n("sk-proj-", 48)
ANTHROPIC = _n("sk-ant-api03-", 60)
STRIPE = _n("sk_live_", 28)
SLACK = "xoxb-" + "123456789012-1234567890123-" + _A[:24]
GITHUB = _n("ghp_", 36)
GITHUB_PAT = _n("github_pat_", 40)
GITLAB = _n("glpat-", 20)
GOOGLE = "AIza" + (_A * 2)[:35]
HUGGINGFACE = _n("hf_", 34)
AWS_ID = "AKIA" + "Q7LM2XC8VB1NK6HJ"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY"
JWT = "eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0." + "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
PG_PW = "pg" + _A[:14]
HTTP_PW = "hp" + _A[:12]
PW_A, PW_B, PW_C = "Aa1" + _A[:5], "Bb2" + _A[5:10], "Cc3" + _A[10:15]
PEM_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7" + _A
BEARER = _n("ya29.", 40)
YAML_TOKEN = _n("tok", 32)
SECRET_ENV = _n("s3", 32)
DEPLOY_KEY = _n("dk", 32)

# (text with a secret, the secret values that must never appear anywhere afterwards)
SECRETS: list[tuple[str, tuple[str, ...]]] = [
    (f"here is my key {OPENAI} please keep it safe", (OPENAI,)),
    (f"new project key: {OPENAI_PROJ}", (OPENAI_PROJ,)),
    (f"claude key {ANTHROPIC}", (ANTHROPIC,)),
    (f"stripe.api_key = '{STRIPE}'", (STRIPE,)),
    (f"charge with {STRIPE} in prod", (STRIPE,)),
    (f"SLACK_BOT={SLACK}", (SLACK,)),
    (f"export GITHUB_TOKEN={GITHUB}", (GITHUB,)),
    (f"gh auth with {GITHUB_PAT}", (GITHUB_PAT,)),
    (f"gitlab token {GITLAB}", (GITLAB,)),
    (f"maps key {GOOGLE}", (GOOGLE,)),
    (f"HF hub login {HUGGINGFACE}", (HUGGINGFACE,)),
    (f"[default]\naws_access_key_id = {AWS_ID}\naws_secret_access_key = {AWS_SECRET}\n", (AWS_ID, AWS_SECRET)),
    (f"AWS_SECRET_ACCESS_KEY={AWS_SECRET} AWS_ACCESS_KEY_ID={AWS_ID}", (AWS_ID, AWS_SECRET)),
    (f"the id {AWS_ID} leaked in a log", (AWS_ID,)),
    (f"DATABASE_URL=postgres://app:{PG_PW}@db.internal:5432/app", (PG_PW,)),
    (f"curl https://deploy:{HTTP_PW}@git.example.com/repo.git", (HTTP_PW,)),
    (f"Authorization: Bearer {BEARER}", (BEARER,)),
    (f"cookie session={JWT}; path=/", (JWT,)),
    (f"id_token {JWT}", (JWT,)),
    (f"auth:\n  token: {YAML_TOKEN}\n  user: bob\n", (YAML_TOKEN,)),
    (f"password={PW_A};{PW_B}&{PW_C}", (PW_A, PW_B, PW_C)),
    (f'{{"password": "{PW_A}", "user": "x"}}', (PW_A,)),
    (f"MY_SERVICE_SECRET={SECRET_ENV}", (SECRET_ENV,)),
    (f"DEPLOY_KEY: {DEPLOY_KEY}", (DEPLOY_KEY,)),
    (f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----", (PEM_BODY,)),
    (f'{{"api_key": "{OPENAI}", "n": 1}}', (OPENAI,)),
]

# Ordinary code and prose: redaction must leave every one of these exactly as it is.
CLEAN: list[str] = [
    "def get_token(self):\n    return self.token\n",
    "token = self._token or os.environ.get('GITHUB_TOKEN')",
    "cache_key = f'{user_id}:{page}'",
    "primary_key = 'id'",
    "sort_key = lambda row: row.created_at",
    "for key, value in mapping.items():\n    print(key, value)",
    "The API key rotation happens every 90 days; ask ops for a new key.",
    "Use a bearer token in the Authorization header (see the docs).",
    "secret_name = 'prod-db'",
    "We use sk-learn style estimators and scikit-learn pipelines.",
    "Set TOKEN_TTL=3600 and KEY_SIZE=2048 for the signer.",
    "https://example.com/path?a=1&b=2",
    "postgres://localhost:5432/app",
    "ssh git@github.com:owner/repo.git",
    "The password policy needs 12 characters.",
    "monkey: banana",
    "keyboard: us\ntokenizer: cl100k_base\n",
    "Read src/app.py line 42; the deploy key lives in /etc/keys/staging-deploy.pem",
    "ticket ING-7731 and AKIA prefix docs",
    "git commit -m 'fix token refresh race'",
    "Tokens: 12345 in, 678 out.",
    "SELECT key, value FROM settings WHERE key = 'theme';",
    "headers = {'Accept': 'application/json', 'X-Request-Id': request_id}",
    "eyJ is how base64 JSON starts; see RFC 7519.",
    "return {\"token\": token, \"expires_in\": 3600}",
    "api_key = config.api_key",
    "password = getpass.getpass()",
    "The quick brown fox jumps over the lazy dog.",
    "x = {'key': 'value', 'other': [1, 2, 3]}",
    "const secret = process.env.SECRET;",
]
