//! Table tests of the normaliser.
