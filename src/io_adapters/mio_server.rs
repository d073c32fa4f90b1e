//! The mio event-loop server (issue 4).
