"""Events out (docs/events.md): what the gate tells the systems around it without being asked.

`cloudevent` shapes an event (CloudEvents 1.0, structured JSON), `signatures` signs a webhook
delivery per the Standard Webhooks specification, `targets` refuses webhook addresses that would
reach inside the operator's network (SSRF), `backoff` schedules retries, `webhook` posts one
delivery, `outbound` is the one client of every request the gate makes (the same checks). The outbox rows live in `gate.ledger.outbox`; the use case in `gate.services.events`.
"""
