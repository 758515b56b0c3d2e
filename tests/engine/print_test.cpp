// Placeholder: the print tests are being written.
