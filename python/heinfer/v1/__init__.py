"""Generated protobuf code of heinfer's wire schema (``proto/heinfer/v1``); regenerate it with
``make proto``. Layer: below ``heinfer.protocol`` and ``heinfer.serve``; imports nothing of heinfer."""
