"""Cloud vendor APIs that jobpulse serves unchanged, so that scripts and SDKs written for them work by
changing only the endpoint and the credential.

- ``modelarts``: Huawei ModelArts, a training task's running metrics and its log preview.
- ``pai``: Alibaba Cloud PAI-DLC GetJobMetrics.
- ``baseten``: Baseten's training-job metrics.
- ``nodes``: what the three count as a task, a pod or a node of a job of nodes and ranks.

Each module is a thin translation over the store's query layer: it finds the jobpulse API key where the
vendor's clients put their credential, or checks the request's signature with a jobpulse access key pair as
the vendor's SDK makes it (``server/signatures``), hands the key to the server's single access check,
converts units, shapes the answer as the vendor documents it, and answers every error on its routes in the
vendor's error shape.
"""
