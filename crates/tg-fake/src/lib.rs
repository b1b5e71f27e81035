//! tg-fake
