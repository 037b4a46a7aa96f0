"""Data migrations of billing, run forwards and backwards on the real database."""

from __future__ import annotations

from gpucloud import crypto

BEFORE, AFTER = ("billing", "0002_usage_hour"), ("billing", "0003_auth_encrypt_webhook_url")


def test_existing_webhook_urls_are_encrypted_by_the_migration(migrate, make_tenant):
    tenant = make_tenant("acme")
    old = migrate(BEFORE)
    url = "https://hooks.example.com/services/secret-1234"
    old.get_model("billing", "Budget").objects.create(tenant_id=tenant.pk, monthly_amount=10, webhook_url=url)

    new = migrate(AFTER)

    budget = new.get_model("billing", "Budget").objects.get(tenant_id=tenant.pk)
    assert "secret-1234" not in budget.webhook_url_ciphertext
    assert crypto.decrypt(budget.webhook_url_ciphertext) == url
    back = migrate(BEFORE).get_model("billing", "Budget").objects.get(tenant_id=tenant.pk)
    assert back.webhook_url == url
