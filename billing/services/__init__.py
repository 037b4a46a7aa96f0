"""Every write of billing, one module per job: `ingest` (scrapes into the ledger), `rates` (rate cards),
`invoicing` (invoices and audited exports) and `budgets` (alerts and enforcement).
"""
