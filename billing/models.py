"""Usage, rate cards and invoices (see issue 5); nothing is stored here yet."""
