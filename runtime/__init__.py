"""Everything that runs an artifact: programs (pte / eager), runners, generators."""
