//! `OneOrMany`: a list that holds its first element inline, so the plan of a one-batch append (what
//! recovery and most produce requests make) allocates nothing.

/// A `Vec` that does not allocate for zero or one element.
#[derive(Debug, Clone, Default)]
pub(crate) enum OneOrMany<T> {
    #[default]
    Empty,
    One(T),
    Many(Vec<T>),
}

impl<T> OneOrMany<T> {
    #[inline]
    pub(crate) fn push(&mut self, value: T) {
        match self {
            OneOrMany::Empty => *self = OneOrMany::One(value),
            OneOrMany::One(_) => {
                let OneOrMany::One(first) = std::mem::take(self) else {
                    unreachable!("matched One");
                };
                *self = OneOrMany::Many(vec![first, value]);
            }
            OneOrMany::Many(values) => values.push(value),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        match self {
            OneOrMany::Empty => true,
            OneOrMany::One(_) => false,
            OneOrMany::Many(values) => values.is_empty(),
        }
    }

    pub(crate) fn as_slice(&self) -> &[T] {
        match self {
            OneOrMany::Empty => &[],
            OneOrMany::One(value) => std::slice::from_ref(value),
            OneOrMany::Many(values) => values,
        }
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [T] {
        match self {
            OneOrMany::Empty => &mut [],
            OneOrMany::One(value) => std::slice::from_mut(value),
            OneOrMany::Many(values) => values,
        }
    }

    pub(crate) fn iter(&self) -> std::slice::Iter<'_, T> {
        self.as_slice().iter()
    }
}

impl<T> IntoIterator for OneOrMany<T> {
    type Item = T;
    type IntoIter = IntoIter<T>;

    fn into_iter(self) -> IntoIter<T> {
        match self {
            OneOrMany::Empty => IntoIter::One(None),
            OneOrMany::One(value) => IntoIter::One(Some(value)),
            OneOrMany::Many(values) => IntoIter::Many(values.into_iter()),
        }
    }
}

pub(crate) enum IntoIter<T> {
    One(Option<T>),
    Many(std::vec::IntoIter<T>),
}

impl<T> Iterator for IntoIter<T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        match self {
            IntoIter::One(value) => value.take(),
            IntoIter::Many(values) => values.next(),
        }
    }
}
