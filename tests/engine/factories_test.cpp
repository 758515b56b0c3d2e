// Placeholder: the factories tests are being written.
