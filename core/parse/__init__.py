"""Reading finished logs and earlier results into tprimat results (``tprimat parse``, ``tprimat import-legacy``)."""
