"""The portal's pages, one module per area. Each reads through the API's selectors and writes through its
services, so every rule, permission and message is the API's (docs/portal.md)."""
