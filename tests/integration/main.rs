//! The one integration test binary of Assent.
