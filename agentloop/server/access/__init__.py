"""Who may come in: bearer tokens and scopes (auth), and the Host/Origin doors every request passes (doors)."""
