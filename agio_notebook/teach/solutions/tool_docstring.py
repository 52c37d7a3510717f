"""tool_docstring: the docstring is what the model reads."""

from ...tools import tool
from ..course.tools import RATES


def reference(amount: float, currency: str) -> str:
    """Convert an amount of US dollars to another currency.

    Args:
        amount: how many US dollars.
        currency: the target currency, a three-letter ISO 4217 code such as 'EUR', 'GBP' or 'JPY'.
    """
    return f"{amount * RATES[currency]:.2f} {currency}"


def no_docstring(amount: float, currency: str) -> str:
    return f"{amount * RATES[currency]:.2f} {currency}"


def arguments_undescribed(amount: float, currency: str) -> str:
    """Convert an amount of US dollars to another currency."""
    return f"{amount * RATES[currency]:.2f} {currency}"


reference = tool(reference, name='convert_currency')
no_docstring = tool(no_docstring, name='convert_currency')
arguments_undescribed = tool(arguments_undescribed, name='convert_currency')

WRONG = [(no_docstring, "did not call convert_currency"),
         (arguments_undescribed, "currency='euros', not a currency code")]
