"""Training EAGLE-3 drafts (and the bundled toy target): the data a draft learns from
(``data``: corpus windows, the target's own continuations, stored target features), the
training-time-test trainer (``train_draft``), the pipeline behind ``etspec draft train``
(``pipeline``) and offline scores of a draft (``acceptance``)."""
