//! What the adapter's tests share: the invoicing service and the scripted model.

pub mod invoicing;
pub mod scripted;
