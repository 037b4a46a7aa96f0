"""`manage.py tenant_standing SLUG [--no-cost] [--json]`: where a tenant stands now, as the API and the
portal's Standing tab show it: per GPU class guaranteed, burst, in use, borrowed and lent; its running pods'
GPU utilisation, idle first; and, unless `--no-cost`, what that costs (the console is an operator's)."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from billing.api.serializers import StandingSerializer
from billing.standing import Standing, standing_of
from tenants.models import Tenant

CLASS_COLUMNS = ("GPU class", "guaranteed", "burst", "in use", "borrowed", "lent")
POD_COLUMNS = ("pod", "class", "units", "node", "util now", "memory MiB", "mean util", "GPU-h")


class Command(BaseCommand):
    help = "Where a tenant stands now: quota use, borrowing, lending, running pods' GPU utilisation, cost."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug", help="the tenant")
        parser.add_argument("--no-cost", action="store_true", help="leave the money out")
        parser.add_argument(
            "--json", action="store_true", dest="as_json", help="the API's JSON instead of tables"
        )

    def handle(self, *args: Any, slug: str, no_cost: bool, as_json: bool, **options: Any) -> None:
        tenant = Tenant.objects.exclude(state=Tenant.State.DELETED).filter(slug=slug).first()
        if tenant is None:
            raise CommandError(f"no tenant {slug!r}; `manage.py shell` can list Tenant.objects")
        now = standing_of(tenant, with_cost=not no_cost)
        if as_json:
            self.stdout.write(_json(now, with_cost=not no_cost))
            return
        self.stdout.write("\n".join(_text(now)))


def _json(standing: Standing, *, with_cost: bool) -> str:
    return json.dumps(StandingSerializer(standing, context={"with_cost": with_cost}).data, indent=2)


def _text(standing: Standing) -> list[str]:
    money = standing.currency is not None
    lines = [f"{standing.tenant.slug} at {standing.at:%Y-%m-%d %H:%M:%S} UTC"]
    header = CLASS_COLUMNS + (("price/unit-h", "cost/h now") if money else ())
    rows = [
        [c.gpu_class, c.guaranteed, c.burst, c.in_use, c.borrowed, c.lent]
        + ([_money(c.price_per_hour), _money(c.cost_per_hour)] if money else [])
        for c in standing.classes
    ]
    lines += _table(header, rows) if rows else ["no quota and no GPU in use"]
    lines.append("")
    header = POD_COLUMNS + (("cost",) if money else ())
    rows = [
        [w.name, w.gpu_class, w.units, w.node, _percent(w.utilisation), _mib(w.memory_mib)]
        + [_percent(w.mean_utilisation), f"{w.gpu_hours:.2f}"]
        + ([_money(w.cost)] if money else [])
        for w in standing.workloads
    ]
    lines += _table(header, rows) if rows else ["no running pod"]
    if money:
        lines += ["", f"spent this month: {standing.spent_this_month} {standing.currency}"]
    return lines


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}%"


def _mib(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def _money(value: Any) -> str:
    return "-" if value is None else str(value)


def _table(header: tuple[str, ...], rows: list[list[Any]]) -> list[str]:
    cells = [list(header)] + [[str(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in cells]
