from rest_framework.pagination import LimitOffsetPagination


class Pagination(LimitOffsetPagination):
    """`?limit=&offset=` on every list; answers carry count, next, previous and results."""

    default_limit = 50
    max_limit = 500
