// Placeholder: the memory tests are being written.
