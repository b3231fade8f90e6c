"""The optional bearer token of the observability endpoint (``metrics.token``)."""

from __future__ import annotations

import hmac


class BearerToken:
    """Checks ``Authorization: Bearer <token>`` headers; allows everything without a token.

    The token is compared in constant time and never shown (``repr`` hides it).
    """

    __slots__ = ("_expected",)

    def __init__(self, token: str | None) -> None:
        self._expected = None if not token else f"Bearer {token}".encode()

    @property
    def required(self) -> bool:
        return self._expected is not None

    def allows(self, authorization: str | None) -> bool:
        """True when no token is set, or ``authorization`` carries exactly the token."""
        if self._expected is None:
            return True
        if authorization is None:
            return False
        return hmac.compare_digest(authorization.strip().encode(), self._expected)

    def __repr__(self) -> str:
        return f"BearerToken(required={self.required})"
