// ParleyPush: push jobs, gateway client, worker.
