"""tools/judge_client.py's transport inside this process: the reader API's own views, without a socket.

For `load_demo` (which runs the rule-based judge over the demo study) and the tests: each call
goes through URL resolution, token authentication, permissions and serializers exactly as an
HTTP request would; only the network is left out.
"""

import json

from django.urls import resolve
from rest_framework.test import APIRequestFactory

from annotation.models import ApiToken, TokenScope
from annotation.tokens import issue_token, revoke_token

# The token this transport makes for its judge, made again (a new key) for each transport.
TOKEN_NAME = "In-process client"  # noqa: S105 (a name, not a secret)


class InProcessTransport:
    def __init__(self, user) -> None:
        for earlier in ApiToken.objects.filter(user=user, name=TOKEN_NAME):
            revoke_token(earlier, actor=None)
        key = issue_token(user, name=TOKEN_NAME, scope=TokenScope.READING)[1]
        self.headers = {"HTTP_AUTHORIZATION": f"Token {key}"}
        self.factory = APIRequestFactory()

    def _call(self, request) -> tuple[int, dict | list | None]:
        match = resolve(request.path)
        response = match.func(request, *match.args, **match.kwargs)
        response.render()
        return response.status_code, json.loads(response.content) if response.content else None

    def get(self, path: str) -> tuple[int, dict | list | None]:
        return self._call(self.factory.get(path, **self.headers))

    def post(self, path: str, body: dict) -> tuple[int, dict | list | None]:
        return self._call(self.factory.post(path, body, format="json", **self.headers))
