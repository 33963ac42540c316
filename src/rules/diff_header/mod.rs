//! Rules about the diff itself rather than the code: was it made by git from the branch, and
//! does it match the repository it claims to change.

pub mod diff_does_not_apply;
pub mod identical_index_hashes;
pub mod index_hash_mismatch;
