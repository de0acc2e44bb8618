"""The web app at /app: sessions, device sign-in, and the pages.

Routes live in ``claros.api.web``; this package holds what they use. ``sessions`` is also
imported by ``claros.api.http`` (a session cookie is a credential), so it must not import
``claros.api``.
"""
