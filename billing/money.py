"""The one money type: a decimal with explicit digits, decimal places and bounds, used by every door.

Each kind of amount a person types (a price per GPU-hour, a trust-tier multiplier, a monthly budget) is a
`Money`, and the model column, the API's serializer field, the portal's form field and the manifests' JSON
Schema are all built from it, so they cannot disagree. `parse` is the one rule: a finite decimal within the
bounds with at most `decimal_places` places; anything else is refused naming the field and the allowed range
(never rounded, never a 500).

The bounds are a count of integer digits, so the largest value (`999999.999999` for six and six) is also what
a JSON Schema pattern can say exactly, and `max_digits` is what the column holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from django import forms
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from rest_framework import serializers

from gpucloud.errors import ValidationFailed

FLOAT_DIGITS = 15  # sys.float_info.dig: any decimal of up to 15 digits survives a binary float exactly


@dataclass(frozen=True)
class Money:
    """A kind of amount: what it is, its digits before and after the point, and its smallest value."""

    what: str  # "a price per GPU-hour", read in messages
    integer_digits: int
    decimal_places: int
    minimum: Decimal = Decimal(0)

    @property
    def max_digits(self) -> int:
        return self.integer_digits + self.decimal_places

    @property
    def maximum(self) -> Decimal:
        return Decimal(10) ** self.integer_digits - Decimal(1).scaleb(-self.decimal_places)

    @property
    def places(self) -> Decimal:
        return Decimal(1).scaleb(-self.decimal_places)

    @property
    def rule(self) -> str:
        """The range in words: "a decimal number from 0 to 999999.999999, at most 6 decimal places"."""
        return (
            f"a decimal number from {self.minimum} to {self.maximum}, "
            f"at most {self.decimal_places} decimal places"
        )

    @property
    def pattern(self) -> str:
        """The digits this kind may have, as a regular expression (RE2-safe: CRDs use it too)."""
        return rf"^[0-9]{{1,{self.integer_digits}}}(\.[0-9]{{1,{self.decimal_places}}})?$"

    def refusal(self, value: Any, why: str = "is out of range") -> str:
        """Why `value` is refused and what is allowed (the field is named beside it, not in it)."""
        return f"{value!s:.40} {why}; {self.what} is {self.rule}"

    def parse(self, value: Any, field: str) -> Decimal:
        """`value` (a string, a number, a Decimal) as a Decimal of this kind; `ValidationFailed` on `field`
        naming the range otherwise. Trailing zeros do not count as places ("2.50000000" is 2.5)."""
        try:
            return self.checked(value)
        except ValueError as exc:
            raise ValidationFailed(f"{field}: {exc}", errors={field: [str(exc)]}) from None

    def checked(self, value: Any) -> Decimal:
        """`parse` without a field: ValueError with the refusal."""
        not_a_number = ValueError(self.refusal(value, "is not a decimal number"))
        if isinstance(value, bool) or not isinstance(value, str | int | float | Decimal):
            raise not_a_number
        try:
            number = Decimal(str(value).strip())
        except InvalidOperation:
            raise not_a_number from None
        if not number.is_finite():
            raise not_a_number
        if isinstance(value, float) and len(number.as_tuple().digits) > FLOAT_DIGITS:
            # A JSON number reaches Python as a binary float: beyond 15 digits, what was sent may not be
            # what arrived (1234567890123456.12 arrives as …56.2), and money is never silently changed.
            raise ValueError(
                self.refusal(value, f"has more than {FLOAT_DIGITS} digits; send it as a string to keep each")
            )
        if not self.minimum <= number <= self.maximum:
            raise ValueError(self.refusal(value))
        if _places(number) > self.decimal_places:
            raise ValueError(self.refusal(value, "has too many decimal places"))
        # One spelling without an exponent: 1E+2 is 100; trailing zeros beyond the places are dropped.
        exponent = int(number.as_tuple().exponent)
        if exponent > 0:
            return number.quantize(Decimal(1))
        if -exponent > self.decimal_places:
            return number.quantize(self.places)
        return number

    def text(self, value: Any) -> str:
        """A stored value as the API shows it: exactly `decimal_places` places; a value stored before the
        bounds held (out of range) is shown as it is rather than failing the whole answer."""
        try:
            number = Decimal(str(value))
            if self.minimum <= number <= self.maximum:
                return str(number.quantize(self.places))
            return format(number, "f") if number.is_finite() else str(value)
        except InvalidOperation:
            return str(value)

    def model_field(self, **kwargs: Any) -> models.DecimalField[Decimal, Decimal]:
        return models.DecimalField(
            max_digits=self.max_digits,
            decimal_places=self.decimal_places,
            validators=[MinValueValidator(self.minimum), MaxValueValidator(self.maximum)],
            **kwargs,
        )

    def serializer_field(self, **kwargs: Any) -> MoneyField:
        return MoneyField(self, **kwargs)

    def form_field(self, **kwargs: Any) -> forms.CharField:
        """Text, as the portal's number fields are: the service parses it, its refusal shows by the field."""
        kwargs.setdefault("help_text", f"{self.rule[0].upper()}{self.rule[1:]}.")
        return forms.CharField(required=False, widget=forms.TextInput({"inputmode": "decimal"}), **kwargs)

    def schema(self) -> dict[str, Any]:
        """The JSON Schema of a manifest's money field: a string of these digits, quoted in YAML (the minimum
        is the service's to check, with its message)."""
        return {"type": "string", "pattern": self.pattern, "description": f"{self.what}: {self.rule}"}


def _places(number: Decimal) -> int:
    """Decimal places that matter: trailing zeros do not (no `normalize()`, which underflows to 0)."""
    _, digits, exponent = number.as_tuple()
    assert isinstance(exponent, int)  # finite
    if not number:
        return 0
    trailing = len(digits) - len("".join(map(str, digits)).rstrip("0"))
    return max(0, -(exponent + trailing))


class MoneyField(serializers.DecimalField):
    """A `Money` in the API: read and written as a decimal string, refused with the money type's message."""

    def __init__(self, money: Money, **kwargs: Any) -> None:
        self.money = money
        kwargs.setdefault("help_text", f"{money.what}: {money.rule}")
        super().__init__(
            max_digits=money.max_digits,
            decimal_places=money.decimal_places,
            min_value=money.minimum,
            max_value=money.maximum,
            **kwargs,
        )

    def to_internal_value(self, data: Any) -> Decimal:
        try:
            return self.money.checked(data)
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from None

    def to_representation(self, value: Any) -> str:
        return self.money.text(value)


class MoneyFieldSchema(OpenApiSerializerFieldExtension):
    """The published contract says what `Money.parse` accepts: these digits, no sign, and the range."""

    target_class = MoneyField

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        kind: Money = self.target.money
        return {"type": "string", "format": "decimal", "pattern": kind.pattern}


# A price per GPU-hour: below a million, to the micro-unit. With the multiplier below 100, a unit price
# stays below 10^8 and fits the invoice line's unit price column (14 digits, 6 places).
PRICE = Money("a price per GPU-hour", integer_digits=6, decimal_places=6)
MULTIPLIER = Money("a trust-tier multiplier", integer_digits=2, decimal_places=4)
BUDGET = Money("a monthly budget", integer_digits=16, decimal_places=2, minimum=Decimal("0.01"))
KINDS = (PRICE, MULTIPLIER, BUDGET)
