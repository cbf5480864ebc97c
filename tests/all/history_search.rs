//! `history_search`: the model finds what a compaction summary dropped.
