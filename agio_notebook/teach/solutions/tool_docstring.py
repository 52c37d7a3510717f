"""tool_docstring: the docstring is what the model reads."""

ENTRY = "convert_currency"
SOURCE = '''
from agio_notebook.exercises import RATES

def convert_currency(amount: float, currency: str) -> str:
    """Convert an amount of US dollars to another currency.

    Args:
        amount: how many US dollars.
        currency: the currency to convert to, a three-letter ISO 4217 code such as 'EUR', 'GBP' or 'JPY'.
    """
    return f"{amount * RATES[currency]:.2f} {currency}"
'''
