// Placeholder: the indexing tests are being written.
