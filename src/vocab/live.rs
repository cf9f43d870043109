//! A value a reload replaces whole: readers take the `Arc` in force and keep it for as long as
//! they need (a turn keeps the settings it started with); `set` swaps in a new one for the next
//! readers. Never a lock held across an await.

use std::sync::{Arc, PoisonError, RwLock};

/// A value replaced whole on reload.
#[derive(Debug)]
pub struct Live<T: ?Sized> {
    current: RwLock<Arc<T>>,
}

impl<T: ?Sized> Live<T> {
    /// A live value starting as `value`.
    pub fn new(value: Arc<T>) -> Self {
        Self { current: RwLock::new(value) }
    }

    /// The value in force.
    pub fn get(&self) -> Arc<T> {
        self.current.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Put `value` in force for the next readers; those holding the old one keep it.
    pub fn set(&self, value: Arc<T>) {
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = value;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_keeps_what_it_took() {
        let live: Live<[u32]> = Live::new(Arc::from(vec![1, 2]));
        let held = live.get();
        live.set(Arc::from(vec![3]));
        assert_eq!(&*held, &[1, 2]);
        assert_eq!(&*live.get(), &[3]);
    }
}
