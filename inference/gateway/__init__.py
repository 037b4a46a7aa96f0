"""The inference gateway: `gpucloud gateway` (`inference.gateway.app`), its limits and its ledger."""
